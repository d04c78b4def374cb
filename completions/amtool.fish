# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_amtool_global_optspecs
    string join \n h/help V/version
end

function __fish_amtool_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_amtool_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_amtool_using_subcommand
    set -l cmd (__fish_amtool_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c amtool -n "__fish_amtool_needs_command" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_needs_command" -s V -l version -d 'Print version'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "bench" -d 'Run the benchmark cases (../shared/bench/README.md) and print one JSON line per case'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "copy" -d 'Copy Kaldi tables or objects, converting binary/text (copy-feats, copy-matrix, copy-vector, copy-int-vector, copy-post, gmm-copy, gmm-global-copy, fgmm-global-copy)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "herest" -d 'HTK embedded Baum-Welch re-estimation with HERest\'s own options (-C -I -S -H -M -t -u ...)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "shims" -d 'Create symlinks named like the Kaldi tools amtool replaces (put DIR first on PATH)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "completions" -d 'Print a shell completion script (e.g. `amtool completions bash > /etc/bash_completion.d/amtool`)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "man" -d 'Write the man pages generated from these option definitions into DIR'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l engine -d 'Engine to run: cpu or cuda' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l case -d 'Case to run (repeatable; default: all): estep_seed000, score_seed002, score_seed002_var, fullcov_score_seed001, acc_ali' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l frames -d 'Frames per case (T for estep_seed000) instead of the paper\'s' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l gaussians -d 'Gaussians of the estep_seed000 GMM (one M instead of 32, 256, 2048)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l states -d 'States (pdfs for acc_ali)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l gaussians-per-state -d 'Gaussians per state (the mean for score_seed002_var and acc_ali)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l dim -d 'Feature dimension' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l threads -d 'CPU engine threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l reps -d 'Timed runs per case after one warm-up (the median is reported; at least 3 for figures you publish)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l check-frames -d 'Most frames checked against the float64 reference' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l binary -d 'Write in binary mode (single objects; for tables the wspecifier\'s `t`/`b` decides, as in Kaldi)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l compress -d 'Compress matrices (as copy-feats --compress=true)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l compression-method -d 'Compression method: 1 auto, 2 speech feature (CM), 3 two-byte auto (CM2), 4 two-byte signed integer, 5 one-byte auto (CM3), 6 one-byte unsigned integer, 7 one-byte 0..1' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l kaldi-tool -d 'The Kaldi tool this copy stands in for (set by the shims: copy-feats, copy-matrix, ...)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand herest" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand shims" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand completions" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand man" -l completions -d 'Also write the bash/zsh/fish completion scripts into this folder' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand man" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy herest shims completions man help" -f -a "bench" -d 'Run the benchmark cases (../shared/bench/README.md) and print one JSON line per case'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy herest shims completions man help" -f -a "copy" -d 'Copy Kaldi tables or objects, converting binary/text (copy-feats, copy-matrix, copy-vector, copy-int-vector, copy-post, gmm-copy, gmm-global-copy, fgmm-global-copy)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy herest shims completions man help" -f -a "herest" -d 'HTK embedded Baum-Welch re-estimation with HERest\'s own options (-C -I -S -H -M -t -u ...)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy herest shims completions man help" -f -a "shims" -d 'Create symlinks named like the Kaldi tools amtool replaces (put DIR first on PATH)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy herest shims completions man help" -f -a "completions" -d 'Print a shell completion script (e.g. `amtool completions bash > /etc/bash_completion.d/amtool`)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy herest shims completions man help" -f -a "man" -d 'Write the man pages generated from these option definitions into DIR'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy herest shims completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
