"""From a waived deviation to a bug report its maintainers can act on: `gpt2-conformance upstream
NAME` (upstream/command.py) writes, for each cause behind a backend's waivers, a standalone
reproduction script and an issue draft, and an index of them with their status.

The causes live with the backend, beside its waiver file: `upstream/causes.toml` (one entry per
cause, naming the waived clauses it explains, its script and the draft's text) and the scripts
or script templates it names (gpt2_conformance.upstream.causes reads them, through the
registry). A reproduction that exits 0 means the implementation fixed the behaviour: its
waivers are reported stale (causes.fixed_clauses, waivers.apply)."""
