# The root module holds the library; integration/ is a second module with
# everything that needs client-go or a real kube-apiserver.
GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: check lint test cover bench fuzz

## check: everything CI runs (lint + test)
check: lint test

## lint: gofmt, go vet and staticcheck on the root module
lint:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

## test: go vet and the race-enabled tests of the root module (fuzz seed corpora included)
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## cover: test coverage of the root module
cover:
	$(GO) test -count=1 -coverprofile=coverage.out ./...
	$(GO) tool cover -func=coverage.out | tail -n 1

## bench: the root module's benchmarks
bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./...

## fuzz: each fuzz target for FUZZTIME (go test runs the committed seed corpora anyway)
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzParseRetryAfter$$' -fuzztime=$(FUZZTIME) .
	$(GO) test -run='^$$' -fuzz='^FuzzBackoffStep$$' -fuzztime=$(FUZZTIME) .
