"""Tenants: tokens per namespace (and, later, throttle limits), kept in the admin Redis."""
