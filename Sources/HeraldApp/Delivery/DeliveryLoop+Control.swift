import HeraldAPI

extension DeliveryLoop: DeliveryControl {}
