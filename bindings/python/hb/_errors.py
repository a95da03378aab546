"""hb.HbError: raised by every hb call that fails (see hb.h's status codes)."""


class HbError(Exception):
    """A failed hb call.

    status  -- the hb_status code (an int, e.g. hb.ERR_TIMEOUT)
    name    -- its constant name, e.g. "HB_ERR_TIMEOUT"
    message -- hb_last_error() of the failing call: what was wrong
    """

    def __init__(self, status, name, message):
        super().__init__(status, name, message)
        self.status = status
        self.name = name
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.name, self.message)
