"""The held-out study (issue 15): does geometry explain certified rank demand?"""
