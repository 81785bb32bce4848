# rdmadoctor — build and test.
#   make build   the static binary (CGO_ENABLED=0) in ./bin
#   make check   everything CI runs: vet, the hermetic and live-kernel Go tests, the SoftRoCE VM suite,
#                and the .deb/.rpm packages built and installed (make package-test)
#   make package dist/rdmadoctor_*.deb and dist/rdmadoctor-*.rpm (nfpm, built once into .cache/)
GO ?= go
export CGO_ENABLED ?= 0

.PHONY: build check deps test vet vm bench fuzz golden package package-test

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

check: deps vet test vm package-test

# Packages. nfpm is built from the Go module proxy once per version into
# .cache/; the package's version is the binary's (main.version).
NFPM_VERSION ?= v2.45.2
NFPM := .cache/nfpm-$(NFPM_VERSION)/nfpm
VERSION ?= $(shell sed -n 's/^var version = "\(.*\)"$$/\1/p' cmd/rdmadoctor/main.go)
ARCH ?= $(shell $(GO) env GOARCH)

$(NFPM):
	GOBIN=$(abspath $(dir $(NFPM))) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

package: $(NFPM)
	$(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/rdmadoctor ./cmd/rdmadoctor
	mkdir -p dist .cache/package
	gzip -n -9 <deploy/packaging/changelog >.cache/package/changelog.gz
	rm -f dist/rdmadoctor_*.deb dist/rdmadoctor-*.rpm
	for p in deb rpm; do VERSION=$(VERSION) ARCH=$(ARCH) $(NFPM) package --config deploy/packaging/nfpm.yaml --packager $$p --target dist/ || exit 1; done

package-test: package
	bash testdata/packaging/test.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Run every fuzz target for FUZZTIME each (seed corpora live in testdata/fuzz/).
FUZZTIME ?= 30s
fuzz:
	@for pkg in ./report ./sysfs ./sysfs/snapshot ./checks/expect ./cmd/rdmadoctor ./verbs/peer/wire; do \
	  for t in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# Regenerate the host fixtures and the golden reports after an intended change.
golden:
	$(GO) test ./checks -run TestFixtures -update
	$(GO) test ./cmd/rdmadoctor -run TestGoldenReports -update
