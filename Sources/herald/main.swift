import Glibc
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore

// Everything lives in HeraldApp and the layers below it; the executable only hands over the process's arguments.
var environment: [String: String] = [:]
var pointer = environ
while let entry = pointer.pointee {
    let text = String(cString: entry)
    if let equals = text.firstIndex(of: "=") {
        environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
    }
    pointer += 1
}
let status = CommandLineTool(arguments: CommandLine.arguments, environment: environment).run()
Logger.flush()
exit(status)
