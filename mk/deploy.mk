# Deployment files (deploy/, config/): linted and schema-checked as part of `make test` (docs/deployment.md).
.PHONY: lint-deploy

## make lint-deploy: yamllint, hadolint and Kubernetes schema validation; installs the tools on first use.
lint-deploy: deps
	@scripts/lint-deploy.sh

test: lint-deploy

## make validate-deploy-config: `pushbridge validate` on the configuration deploy/ ships, with the environment
## of Kubernetes and of the compose trial (needs a build, so it is not part of `make test`'s lint step; reads the
## kustomization with the PyYAML of the lint tools' virtual environment).
.PHONY: validate-deploy-config
validate-deploy-config: build lint-deploy
	@scripts/validate-deploy-config.sh $(BIN_DEBUG)

## make check-image: the container image's build and runtime stages without a container runtime (root,
## debootstrap, network to deb.debian.org once): see docs/deployment.md, "Checking the image without Docker".
.PHONY: check-image
check-image: deps
	@scripts/check-image.sh

## make check-fresh: the README's `make run` and `make test` as a new user on a fresh Debian 12 root with only
## Swift installed (root, debootstrap, network to the Debian mirror and PyPI; about 15 minutes, 7 more the first time): see
## docs/deployment.md, "Checking the README on a fresh machine". FRESH_TEST="make …" runs a subset instead.
.PHONY: check-fresh
check-fresh:
	@scripts/check-fresh.sh
