"""The daemon's signals are read by its main loop, never handled by code inside a signal handler (which could
land inside a log write or inside an Event's lock): a real signal, to this process or to one of its threads."""

import os
import signal
import threading

from tuner.daemon.signals import SignalInbox


def test_a_signal_to_the_process_arrives_in_the_inbox_and_does_not_end_it():
    with SignalInbox() as inbox:
        os.kill(os.getpid(), signal.SIGTERM)
        assert inbox.wait(30) == signal.SIGTERM
        assert inbox.wait(0) is None          # taken once


def test_a_signal_the_kernel_gives_another_thread_wakes_the_waiting_thread():
    with SignalInbox() as inbox:
        t = threading.Thread(target=lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT))
        t.start()
        t.join()
        assert inbox.wait(30) == signal.SIGINT


def test_closing_puts_back_the_handlers_it_found():
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with SignalInbox():
        assert signal.getsignal(signal.SIGTERM) not in (before[0], signal.SIG_DFL)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert signal.set_wakeup_fd(-1) == -1     # no wakeup fd left behind
