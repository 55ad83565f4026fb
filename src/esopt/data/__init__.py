"""Dataset loaders (by path or dataset id; nothing is copied into the project)."""
