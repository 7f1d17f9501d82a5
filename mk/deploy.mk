# Deployment files (deploy/, config/): linted and schema-checked as part of `make test` (docs/deployment.md).
.PHONY: lint-deploy

## make lint-deploy: yamllint, hadolint and Kubernetes schema validation; installs the tools on first use.
lint-deploy:
	@scripts/lint-deploy.sh

test: lint-deploy
