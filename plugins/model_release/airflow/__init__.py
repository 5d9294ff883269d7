"""The only part of model-release that imports Airflow: hooks that own connections, thin tasks.

``dags/`` wires these into DAGs and reaches the core only through this package (:mod:`.dagfiles`
holds what the DAG files need from it); the core stage modules know nothing of Airflow.
"""
