"""The questions the paper leaves open (chapter 8): signed features, several heads, level
heads."""
