"""The bench's own code, without timing anything meaningful (speed lives in tests/benchmarks and
`gpt2-conformance bench`). A package, so that its module names (test_command, test_outputs, ...)
never clash with a test module of the same name elsewhere under tests/."""
