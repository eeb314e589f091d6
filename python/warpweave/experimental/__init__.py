"""`warpweave.experimental`: importable placeholders for Triton's experimental namespaces."""
