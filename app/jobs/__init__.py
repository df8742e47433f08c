"""Work that runs off the GUI thread and reports back through Qt signals."""
