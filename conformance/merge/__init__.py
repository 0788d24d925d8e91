"""`gpt2-conformance merge`: many runs into one matrix, parity table, bench table and scoreboard.

model       shared constants, the Run of one report, MergeError, small formatters
inputs      reading report and bench files, and the conflict checks
parity      the cross-run parity section
document    the merged document (merged.json) and its exit code
markdown    merged.md
scoreboard  scoreboard.html
command     the command line: add_parser(subparsers) and run(args)
"""
