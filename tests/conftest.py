import os
import sys

# tests/ holds helper modules (mutants, bad_adapters) imported by name, also by child processes
TESTS_DIR = os.path.dirname(__file__)
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)
