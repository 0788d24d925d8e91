"""The conformance suite: one test module per spec group, every test marked with the clause
it checks. Run it with `pytest --pyargs gpt2_conformance.suite --gpt2c-backend NAME` or through the CLI."""
