"""`is_fbcode_dependant()`: False, warpweave never runs inside Meta's fbcode (TLX tests skip
their fbcode-only cases on it)."""


def is_fbcode_dependant() -> bool:
    return False
