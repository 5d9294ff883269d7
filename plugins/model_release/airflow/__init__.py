"""The only part of model-release that imports Airflow: hooks that own connections, thin tasks.

``dags/`` wires these into DAGs; the core stage modules know nothing of Airflow.
"""
