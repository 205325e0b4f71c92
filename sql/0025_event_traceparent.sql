-- Traces (issue 40): an event's W3C traceparent (CloudEvents' distributed-tracing extension),
-- stored with the event once, so that every job the event produced can carry it in its `data`
-- when it is claimed (a push traced from the bus to the device). Null when the event had none
-- or its value was not of the exact W3C form. Adding a nullable column rewrites nothing.
ALTER TABLE events ADD COLUMN traceparent text;
