"""Built-in rubric library (markdown files shipped as package data)."""
