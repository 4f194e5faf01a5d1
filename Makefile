.PHONY: check test serve lint types codegen bench

check:  ## lint, types, generated code, tests: what CI runs
	scripts/check

test:
	scripts/test

serve:
	scripts/serve

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

types:
	.venv/bin/mypy

codegen:
	.venv/bin/python -m scaler.codegen
