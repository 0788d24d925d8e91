"""The NumPy reference backend: the spec's formulas, with the spec's input checks."""
