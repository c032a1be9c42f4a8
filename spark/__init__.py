"""PySpark data source reading archived segments from the bucket (milestone: issue 5)."""
