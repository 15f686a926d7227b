# Thin wrapper over meson: `make run`, `make test`, `make bench`.
BUILD ?= build
PLUGIN_PATH = $(CURDIR)/$(BUILD)/plugins:$(CURDIR)/$(BUILD)/sinks
SECONDS ?= 5

.PHONY: all run test bench bench-smoke install clean

all:
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD)
	ninja -C $(BUILD)

run: all
	NTCORE_PLUGIN_PATH=$(PLUGIN_PATH) $(BUILD)/core/ntcore -c conf.d/default.conf -d $(SECONDS)

test: all
	BUILD=$(BUILD) scripts/test.sh

bench: all
	BUILD=$(BUILD) scripts/bench.sh

bench-smoke: all
	BUILD=$(BUILD) scripts/bench.sh --smoke

install: all
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD)
