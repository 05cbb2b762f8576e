import BskyCtlKit

BskyCtlMain.run()
