"""Tiering: sealed segments to S3-compatible object storage (milestone: issue 4)."""
