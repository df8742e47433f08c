"""The widgets: the main window (views/main/) and the panels, bars, dialogs and chat views it
is made of. Views show what the chat controller and the jobs report and call their methods;
nothing below them imports them (the "app layers" import contract)."""
