"""Examples of adapters for implementations written outside this project (see README.md here)."""
