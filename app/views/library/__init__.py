"""The models on this computer: the toolbar's model picker and its menu, the Model Library
window, and the download dialog."""
