"""The Preferences window (dialog.py); the sections other rooms own (the local server,
distributed) are built there and handed to it."""
