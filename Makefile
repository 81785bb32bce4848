# rdmadoctor — build and test.
#   make build   the static binary (CGO_ENABLED=0) in ./bin
#   make check   everything CI runs: vet, the hermetic and live-kernel Go tests, the fleet tests
#                (make fleet-test), the SoftRoCE VM suite, the .deb/.rpm packages built and installed
#                (make package-test), the Slurm integration under Debian's real slurmctld, slurmd and
#                munge (make slurm-test), the image's root filesystem under chroot (make image-test) and
#                the InfiniBand checks on Debian's ibsim fabric simulator with opensm (make ib-test)
#   make package dist/rdmadoctor_*.deb and dist/rdmadoctor-*.rpm (nfpm, built once into .cache/)
#   make fleet-test  the fleet integration tests (fleettest/): the real node-problem-detector
#                against a fake API server, the Kubernetes manifests decoded strictly
#   make fixtures  the host fixtures under testdata/hosts, made from the generator (sysfs/sysfstest)
#                and the archives in testdata/host-archives; rewritten only where a source changed
#   make image   dist/image/rdmadoctor-rootfs.tar, the container image's root filesystem
#                assembled from Debian packages (root; .debs cached in .cache/image-debs)
GO ?= go
export CGO_ENABLED ?= 0

.PHONY: build check deps fixtures test vet vm bench fuzz golden package package-test slurm-test image image-test fleet-test ib-test

# The commit, for `rdmadoctor version`, where Go's own VCS stamp is off
# (GOFLAGS=-buildvcs=false) or the tree is not a checkout.
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)

build:
	$(GO) build -trimpath -ldflags "-X main.commit=$(COMMIT)" -o bin/rdmadoctor ./cmd/rdmadoctor

# testdata/hosts is not committed: every host fixture is made here from its
# source (docs/development.md#host-fixtures). The Go tests that read it make it
# themselves (TestMain); the scripts below read it through this target.
fixtures:
	$(GO) run ./sysfs/sysfstest/hosttree materialize testdata

vet:
	$(GO) vet ./...

test:
	$(GO) test -count=1 ./...

vm:
	bash testdata/vm/suite.sh

deps:
	bash .ci/deps

# rdmadoctor slurm healthcheck|prolog and deploy/slurm/ under the real Slurm: three slurmd,
# each in its own network and UTS namespace, reading its own host fixture (root only).
slurm-test: build fixtures
	bash testdata/slurm/test.sh bin/rdmadoctor

# The InfiniBand control-plane checks against a fabric simulated by Debian's ibsim, with the real
# opensm and infiniband-diags as the reference (installs them as root when missing; no hardware).
ib-test: build
	bash testdata/ibsim/test.sh bin/rdmadoctor

check: deps vet test fleet-test vm package-test slurm-test image-test ib-test

# Fleet integration tests: fleettest/ is a module of its own (the main module
# never depends on Kubernetes). node-problem-detector is built once per
# version — the one fleettest/go.mod pins — into .cache/, as its own Makefile
# builds it (CGO_ENABLED=0, no journald, the version stamped).
NPD_VERSION := $(shell sed -n 's|^[[:space:]]*k8s.io/node-problem-detector \(v[^ ]*\).*|\1|p' fleettest/go.mod)
NPD := .cache/npd-$(NPD_VERSION)/node-problem-detector

$(NPD):
	mkdir -p $(dir $(NPD))
	cd fleettest && $(GO) build -trimpath -ldflags "-X k8s.io/node-problem-detector/pkg/version.version=$(NPD_VERSION)" \
	  -o $(abspath $(NPD)).tmp k8s.io/node-problem-detector/cmd/nodeproblemdetector
	mv $(NPD).tmp $(NPD)

fleet-test: $(NPD) fixtures
	cd fleettest && $(GO) vet ./... && NPD_BIN=$(abspath $(NPD)) $(GO) test -count=1 ./...

# Packages. nfpm is built from the Go module proxy once per version into
# .cache/; the package's version is the binary's (main.version).
NFPM_VERSION ?= v2.45.2
NFPM := .cache/nfpm-$(NFPM_VERSION)/nfpm
VERSION ?= $(shell sed -n 's/^var version = "\(.*\)"$$/\1/p' cmd/rdmadoctor/main.go)
ARCH ?= $(shell $(GO) env GOARCH)

$(NFPM):
	GOBIN=$(abspath $(dir $(NFPM))) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

package: $(NFPM)
	$(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/rdmadoctor ./cmd/rdmadoctor
	mkdir -p dist .cache/package
	gzip -n -9 <deploy/packaging/changelog >.cache/package/changelog.gz
	gzip -n -9 <docs/man/rdmadoctor.1 >.cache/package/rdmadoctor.1.gz
	gzip -n -9 <docs/man/rdmadoctor-expect.5 >.cache/package/rdmadoctor-expect.5.gz
	bin/rdmadoctor completion bash >.cache/package/rdmadoctor.bash
	bin/rdmadoctor completion zsh >.cache/package/_rdmadoctor
	bin/rdmadoctor completion fish >.cache/package/rdmadoctor.fish
	rm -f dist/rdmadoctor_*.deb dist/rdmadoctor-*.rpm
	for p in deb rpm; do VERSION=$(VERSION) ARCH=$(ARCH) $(NFPM) package --config deploy/packaging/nfpm.yaml --packager $$p --target dist/ || exit 1; done

package-test: package
	bash testdata/packaging/test.sh

# The image without a registry: Debian's libibverbs, providers and their
# dependencies unpacked beside the binary (see deploy/kubernetes/Dockerfile).
image: build
	bash deploy/kubernetes/image/build-rootfs.sh bin/rdmadoctor dist/image .cache/image-debs

image-test: fixtures
	bash testdata/image/test.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Run every fuzz target for FUZZTIME each (seed corpora live in testdata/fuzz/).
FUZZTIME ?= 30s
fuzz:
	@for pkg in ./report ./sysfs ./sysfs/snapshot ./sysfs/sysfstest ./checks/expect ./cmd/rdmadoctor ./verbs/gpu ./verbs/peer/wire; do \
	  for t in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# Regenerate the golden reports after an intended change (the host fixtures
# follow their sources by themselves: make fixtures).
golden: fixtures
	$(GO) test ./cmd/rdmadoctor -run TestGoldenReports -update
