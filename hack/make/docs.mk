##@ Documentation

.PHONY: docs
docs: ## Build the user guide (README.md, docs/, mkdocs.yml) into site/; a broken link or anchor, or a page missing from nav, fails it.
	hack/mkdocs.sh build --strict

verify: docs
