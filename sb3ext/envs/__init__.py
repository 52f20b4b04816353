"""Gymnasium registrations of sb3ext's environments (string entry points only: nothing heavy is imported)."""
