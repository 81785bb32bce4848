# rdmadoctor — build and test.
#   make build   the static binary (CGO_ENABLED=0) in ./bin
#   make check   everything CI runs: vet, the hermetic and live-kernel Go tests, and the SoftRoCE VM suite
GO ?= go
export CGO_ENABLED ?= 0

.PHONY: build check deps test vet vm bench fuzz golden

build:
	$(GO) build -trimpath -o bin/rdmadoctor ./cmd/rdmadoctor

vet:
	$(GO) vet ./...

test:
	$(GO) test -count=1 ./...

vm:
	bash testdata/vm/suite.sh

deps:
	bash .ci/deps

check: deps vet test vm

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Run every fuzz target for FUZZTIME each (seed corpora live in testdata/fuzz/).
FUZZTIME ?= 30s
fuzz:
	@for pkg in ./report ./sysfs ./sysfs/snapshot ./checks/expect; do \
	  for t in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# Regenerate the host fixtures and the golden reports after an intended change.
golden:
	$(GO) test ./checks -run TestFixtures -update
	$(GO) test ./cmd/rdmadoctor -run TestGoldenReports -update
