"""The Extract window: a schema over dropped documents, a table out (window.py)."""
