# Herald: the two commands are `make run` and `make test`.
.PHONY: run test bench fleet-test citus-test image-test build release deps clean

run:      ## build in release mode and serve on 127.0.0.1:8080 with a local database
	@bash scripts/run.sh

test:     ## start a throwaway PostgreSQL and run every test
	@bash scripts/test.sh

bench:    ## build in release mode and measure Herald (BENCH_ARGS="--quick" for a short run)
	@bash scripts/bench.sh $(BENCH_ARGS)

fleet-test: ## three instances on one database under four faults (SIGKILL, fan-out, failover, PgBouncer); ~2 min
	@FLEET_ARGS="$(FLEET_ARGS)" bash scripts/fleet-test.sh

citus-test: ## build Citus, a coordinator and two workers; the integration suite on it, then a load while a third worker is added and the shards rebalanced
	@CITUS_TEST_ARGS="$(CITUS_TEST_ARGS)" bash scripts/citus-test.sh

image-test: ## build deploy/Dockerfile's runtime stage with podman on a debootstrapped Debian 12 and start herald in it
	@bash scripts/image-test.sh

build: deps
	swift build

release: deps
	swift build -c release --product herald

deps:     ## install missing Debian packages
	@bash scripts/deps.sh

clean:    ## remove build products (keeps .herald, the local database)
	rm -rf .build
