"""Companion package for *Three Tokens Force Exponential Feature Rank in Nonnegative
Kernel Attention* (Opazo, 2026): the book's vocabulary, one module per idea."""

__version__ = "0.1.0"
