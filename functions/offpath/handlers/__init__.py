"""The Lambda entry points (api, worker, enqueue, sweeper, notifier, delivery) and what they share.

On Lambda, the garbage collector is paused from here until the entry module's import ends (offpath.collector).
"""

from offpath import collector

collector.pause()
