import FerryCore

extension TransferStatus {
    /// This status with every text field made safe to print (`TerminalText`).
    var visible: TransferStatus {
        var status = self
        status.id = TerminalText.visible(id)
        status.op = op.map(TerminalText.visible)
        status.worker = worker.map(TerminalText.visible)
        status.time = TerminalText.visible(time)
        if var object {
            object.bucket = TerminalText.visible(object.bucket)
            object.key = TerminalText.visible(object.key)
            object.eTag = object.eTag.map(TerminalText.visible)
            object.versionId = object.versionId.map(TerminalText.visible)
            status.object = object
        }
        if var error {
            error.code = TerminalText.visible(error.code)
            error.message = TerminalText.visible(error.message)
            status.error = error
        }
        return status
    }
}
