/*
 * interruptible.c - GIL-released regions that Ctrl-C can stop: the check of
 * the interrupt (platform.h) that the core's loops poll takes the GIL back
 * for PyErr_CheckSignals, so a SIGINT during a long CPU loop raises
 * KeyboardInterrupt within about FP8Q_INTERRUPT_CHECK_MS milliseconds
 * instead of after the loop.
 */
#include "python/binding.h"

/* The interrupt's check, called on the thread that released the GIL (the
 * interrupt's owner): runs the pending Python signal handlers (on the main
 * thread; elsewhere PyErr_CheckSignals does nothing) and stops the loops
 * when one raised. The exception stays set in this thread's state. */
static int check_signals(void *context)
{
    fp8q_py_unlocked *unlocked = (fp8q_py_unlocked *)context;
    int raised;

    PyEval_RestoreThread(unlocked->thread_state);
    raised = PyErr_CheckSignals() < 0;
    unlocked->thread_state = PyEval_SaveThread();
    return raised;
}

void fp8q_py_unlock(fp8q_py_unlocked *unlocked)
{
    unlocked->thread_state = PyEval_SaveThread();
    fp8q_interrupt_begin(&unlocked->interrupt, check_signals, unlocked);
}

void fp8q_py_relock(fp8q_py_unlocked *unlocked, fp8q_status *status)
{
    const int stopped = fp8q_interrupt_end(&unlocked->interrupt);

    PyEval_RestoreThread(unlocked->thread_state);
    if (stopped) {
        *status = FP8Q_ERROR_INTERRUPTED;
    }
}
