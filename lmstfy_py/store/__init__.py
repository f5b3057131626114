"""Everything that touches Redis; nothing here knows about HTTP."""
