"""boto3 code (preflight, status): read-only AWS calls, tested with moto."""
