"""The chat logic, no widgets: the ChatController (what a user action means for the message
tree, the engine request, saving replies), each conversation's formats (constraint and tool
state, the composer's chips) and which part of a long history the model reads."""
