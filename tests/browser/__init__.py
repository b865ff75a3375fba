"""Browser tests (pytest + playwright + Debian chromium). A package, so that its conftest does not
replace the `conftest` module that tests/python imports helpers from."""
