"""Local stand-ins for the embedded, one-machine stack: free ports and a local S3 endpoint.

Everything here starts real servers as child processes bound to 127.0.0.1, and makes sure they
never outlive the process that started them.
"""
