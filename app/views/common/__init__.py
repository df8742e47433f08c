"""Building blocks every window shares: the theme, line icons, dialogs that fit the
screen, keyboard and mouse-wheel rules, announcements for screen readers, figures in plain
words, settings-page labels, dropped files, and the crash dialog. Nothing here imports
another room of the views."""
