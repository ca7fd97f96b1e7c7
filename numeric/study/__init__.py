"""The held-out study: does geometry explain certified rank demand?"""
