# The two commands are `make demo` and `make test`; the rest are their steps.
# `make build TARGETS=uplink-agent` builds only the named targets (the image build does).
# `make manifests` regenerates deploy/manifests/ from the Helm chart.
# `make images REGISTRY=HOST[:PORT]/PATH` builds the agent images with podman and pushes them
# there (deploy/docker/README.md); BASE_IMAGE and KUBECTL choose the base and the kubectl.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CTEST_JOBS ?= $(shell nproc)

.PHONY: all deps configure build test demo bench clean manifests images

all: build

deps:
	@scripts/deps.sh

$(BUILD_DIR)/build.ninja:
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) $(if $(TARGETS),--target $(TARGETS))

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(CTEST_JOBS) --timeout 600

manifests: configure
	@cmake --build $(BUILD_DIR) --target chart_tools
	@deploy/manifests/render.sh $(BUILD_DIR)/tests/chart/chartrender

images: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target uplink-agent
	@BASE_IMAGE="$(BASE_IMAGE)" KUBECTL="$(KUBECTL)" deploy/docker/images.sh $(BUILD_DIR) "$(REGISTRY)"

demo: build
	@scripts/demo.sh $(BUILD_DIR)/bin

# The benchmarks are built only when asked: this turns them on in $(BUILD_DIR) for good.
bench: configure
	@cmake -S . -B $(BUILD_DIR) -DUPLINK_BENCH=ON >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)
	@$(BUILD_DIR)/bin/bench_inventory
	@$(BUILD_DIR)/bin/bench_auth
	@$(BUILD_DIR)/bin/bench_spool
	@$(BUILD_DIR)/bin/bench_node
	@$(BUILD_DIR)/bin/bench_gpu
	@$(BUILD_DIR)/bin/bench_kubectl
	@$(BUILD_DIR)/bin/bench_experiments
	@$(BUILD_DIR)/bin/bench_ingest
	@$(BUILD_DIR)/bin/bench_load
	@$(BUILD_DIR)/bin/bench_load --store postgres
	@$(BUILD_DIR)/bin/bench_load --failover --agents 1000 --upload-interval 5s --sustain 30s --kill-after 10s --pool 64
	@$(BUILD_DIR)/bin/bench_load --failover --restart-database --agents 1000 --upload-interval 5s --sustain 30s --kill-after 10s --pool 64
	@$(BUILD_DIR)/bin/bench_workspace
	@$(BUILD_DIR)/bin/bench_ssh

clean:
	@rm -rf $(BUILD_DIR)
