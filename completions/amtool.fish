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
complete -c amtool -n "__fish_amtool_needs_command" -f -a "copy" -d 'Copy Kaldi tables or objects, converting binary/text (copy-feats, copy-matrix, copy-vector, copy-int-vector, copy-post, gmm-copy, gmm-global-copy, fgmm-global-copy, lattice-copy); HTK MMFs and parameter files too'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "acc-stats" -d 'Accumulate EM statistics (gmm-acc-stats-ali, gmm-acc-stats, gmm-global-acc-stats, fgmm-global-acc-stats)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "align" -d 'Forced alignment with a Kaldi model and training graphs (gmm-align-compiled)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "align-equal" -d 'Equally spaced alignments through the training graphs (align-equal-compiled)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "boost-silence" -d 'Scale the weights of the Gaussians of the listed phones\' pdfs (gmm-boost-silence)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "sum-accs" -d 'Sum accumulator files (gmm-sum-accs, gmm-global-sum-accs, fgmm-global-sum-accs)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "est" -d 'Re-estimate a model from accumulated statistics (gmm-est, gmm-global-est, fgmm-global-est)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "score" -d 'Per-frame log-likelihoods: gmm-compute-likes (Kaldi model), gmm-global-get-frame-likes and fgmm-global-get-frame-likes (global DiagGmm / FullGmm); with --lattices, lattice rescoring (gmm-rescore-lattice)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "score-htk" -d 'Per-frame state log-likelihoods of an HTK HMM set (MMFs + HMM list); columns are the emitting states of the listed HMMs in list order'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "gselect" -d 'Gaussian selection: the n best Gaussians of a global GMM per frame (gmm-gselect, fgmm-gselect)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "global-get-post" -d 'Top-n Gaussian posteriors of a global GMM per frame (gmm-global-get-post)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "gselect-to-post" -d 'Posteriors over the selected Gaussians of a global GMM (fgmm-global-gselect-to-post)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "map-adapt" -d 'MAP adaptation of a Kaldi model per speaker or utterance (gmm-adapt-map)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "ubm-map" -d 'Relevance-MAP adaptation of a diagonal UBM per speaker or utterance (GMM-UBM speaker recognition): adapted GMMs or mean supervectors'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "copy-to-htk" -d 'Write each matrix of a Kaldi table as an HTK parameter file (copy-feats-to-htk)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "rescore-lattice" -d 'Replace the acoustic scores on compact lattices using a new model (gmm-rescore-lattice)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "herest" -d 'HTK embedded Baum-Welch re-estimation with all of HERest\'s own options (-C -I -S -H -M -t -u -d -x -o ...)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "shims" -d 'Create symlinks named like the Kaldi tools amtool replaces (put DIR first on PATH)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "completions" -d 'Print a shell completion script (e.g. `amtool completions bash > /etc/bash_completion.d/amtool`)'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "man" -d 'Write the man pages generated from these option definitions into DIR'
complete -c amtool -n "__fish_amtool_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l engine -d 'Engine to run: cpu or cuda' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l gpus -d 'Run on this many GPUs (a number or all) through the multi-device engine, whose statistics are the same for any number; the JSON lines get a "gpus" key (the devices, AMTOOL_PARTITIONS logical partitions counted). The cpu engine takes its AMTOOL_PARTITIONS' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l case -d 'Case to run (repeatable; default: all engine cases): estep_seed000, score_seed002, score_seed002_var, fullcov_score_seed001, acc_ali, acc_stats_ark, score_ark, estep_fullcov, estep_fullcov_gselect, score_lattice, align_ark (these two read testdata/: run from the source folder; align_ark keeps its archives and models in --path when given); and the feature-archive read cases (never by default; they write --frames x --dim floats, ~1 GB): read_ark, read_ark_compressed; and startup (never by default: amtool acc-stats processes on a recipe-sized job from testdata/, each --use-gpu value alone and --jobs at once)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l frames -d 'Frames per case (T for estep_seed000) instead of the paper\'s' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l gaussians -d 'Gaussians of the estep GMMs (estep_seed000: one M instead of 32, 256, 2048; estep_fullcov 256, estep_fullcov_gselect 2048)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l states -d 'States (pdfs for acc_ali)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l gaussians-per-state -d 'Gaussians per state (the mean for score_seed002_var and acc_ali)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l dim -d 'Feature dimension' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l threads -d 'CPU engine threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l reps -d 'Timed runs per case after one warm-up (the median is reported; at least 3 for figures you publish)' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l path -d 'Folder for the temporary archives of the read cases (default: the system\'s temp folder)' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l jobs -d 'Processes the startup case runs at once' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -l check-frames -d 'Most frames checked against the float64 reference' -r
complete -c amtool -n "__fish_amtool_using_subcommand bench" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l binary -d 'Write in binary mode (single objects; for tables the wspecifier\'s `t`/`b` decides, as in Kaldi)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l compress -d 'Compress matrices (as copy-feats --compress=true)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l compression-method -d 'Compression method: 1 auto, 2 speech feature (CM), 3 two-byte auto (CM2), 4 two-byte signed integer, 5 one-byte auto (CM3), 6 one-byte unsigned integer, 7 one-byte 0..1' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l htk-in -d 'Read the input table\'s objects as HTK parameter files (copy-feats --htk-in)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l write-compact -d 'Lattices: write CompactLattice (true) or non-compact Lattice (false), as lattice-copy (default there: true). Unset, `amtool copy` keeps lattices as stored' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l include -d 'Tables: copy only the keys listed (first field of each line of this text file), as lattice-copy' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l exclude -d 'Tables: copy all but the keys listed (first field of each line of this text file), as lattice-copy' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l ignore-missing -d 'Tables: exit with status 0 even if nothing was copied, as lattice-copy' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l write-num-frames -d 'Tables of matrices: also write each utterance\'s number of frames (rows) to this wspecifier, e.g. \'ark,t:utt2num_frames\' (copy-feats)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l sphinx-in -d 'Read the input table\'s objects as CMU Sphinx feature files (13-dimensional, big-endian), as copy-feats --sphinx-in' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l scale -d 'Scale matrices (copy-matrix), vectors (copy-vector: tables only, as Kaldi\'s) or posterior weights (copy-post) by this factor' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l apply-log -d 'Matrices: take the log of each element, floored at 1e-20 first (copy-matrix)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l apply-exp -d 'Matrices: exponentiate each element (copy-matrix)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l apply-power -d 'Matrices: raise each element to this power (copy-matrix)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l apply-softmax-per-row -d 'Matrices: replace each row by its softmax (copy-matrix)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l change-dim -d 'Vectors: truncate or zero-pad to this dimension; -1 keeps it (copy-vector\'s --change_dim)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l copy-tm -d 'Models: copy the transition model (gmm-copy; false reads and writes the AmDiagGmm alone)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l copy-am -d 'Models: copy the acoustic model, the AmDiagGmm (gmm-copy; false writes the transition model alone)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -l kaldi-tool -d 'The Kaldi tool this copy stands in for (set by the shims: copy-feats, copy-matrix, ...)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l binary -d 'Write output in binary mode' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l use-gpu -d 'Compute on the GPU: yes (or fail), no, optional (GPU if usable, else CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l threads -d 'CPU engine threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l gpus -d 'GPUs to compute on (amtool\'s own option): a number, or all (every GPU CUDA_VISIBLE_DEVICES leaves visible), chosen by free memory as with one; the frames are split among them, with results the same to the bit for any number. Ignored on the CPU. AMTOOL_PARTITIONS=P uses each device (or the CPU) as P logical partitions, to test the splitting without the devices' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l update-flags -d 'Which parameters the statistics are for: subset of mvwt (models; gmm-acc-stats) or mvw (global GMMs). Default: all' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l gselect -d 'Global GMMs: rspecifier of Gaussian-selection lists limiting the Gaussians used on each frame' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l weights -d 'Global GMMs: rspecifier of per-frame weights (a float vector per utterance)' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -l kaldi-tool -d 'The Kaldi tool this run stands in for (set by the shims)' -r
complete -c amtool -n "__fish_amtool_using_subcommand acc-stats" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand align" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand align" -l use-gpu -d 'Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l threads -d 'CPU threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l acoustic-scale -d 'Scaling factor for acoustic likelihoods' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l beam -d 'Decoding beam used in alignment' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l careful -d 'If true, do \'careful\' alignment, which is better at detecting alignment failure (involves loop to start of decoding graph)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l retry-beam -d 'Decoding beam for second try at alignment (0: no retry)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l self-loop-scale -d 'Scale of self-loop versus non-self-loop log probs [relative to acoustics]' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l transition-scale -d 'Transition-probability scale [relative to acoustics]' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l write-per-frame-acoustic-loglikes -d 'Wspecifier for table of vectors containing the acoustic log-likelihoods per frame for each utterance' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l max-active -d 'Decoder max active states (FasterDecoder; gmm-align-compiled keeps the default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l min-active -d 'Decoder min active states (FasterDecoder; gmm-align-compiled keeps the default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l beam-delta -d 'Increment used in decoder [obscure setting] (FasterDecoder)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -l hash-ratio -d 'Setting used in decoder to control hash behavior (FasterDecoder)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand align-equal" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align-equal" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand align-equal" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand align-equal" -l binary -d 'Write output in binary mode' -r
complete -c amtool -n "__fish_amtool_using_subcommand align-equal" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand boost-silence" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand boost-silence" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand boost-silence" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand boost-silence" -l binary -d 'Write output in binary mode' -r
complete -c amtool -n "__fish_amtool_using_subcommand boost-silence" -l boost -d 'Factor by which to boost silence probs' -r
complete -c amtool -n "__fish_amtool_using_subcommand boost-silence" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand sum-accs" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand sum-accs" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand sum-accs" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand sum-accs" -l binary -d 'Write output in binary mode' -r
complete -c amtool -n "__fish_amtool_using_subcommand sum-accs" -l kaldi-tool -d 'The Kaldi tool this run stands in for (set by the shims)' -r
complete -c amtool -n "__fish_amtool_using_subcommand sum-accs" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand est" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand est" -l binary -d 'Write output in binary mode' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l mix-up -d 'Increase the number of mixture components to this overall target (0: no)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l mix-down -d 'gmm-est: merge mixture components down to this overall target (0: no)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l power -d 'gmm-est: power to allocate Gaussians to states when mixing up or down' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l min-count -d 'gmm-est: minimum per-Gaussian count enforced while mixing up and down' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l perturb-factor -d 'While mixing up, perturb means by standard deviation times this factor' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l update-flags -d 'Which parameters to update: subset of mvwt (gmm-est) or mvw (global GMMs). Default: all' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l write-occs -d 'gmm-est: file to write the pdf occupancies to (a text vector)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l transition-floor -d 'gmm-est: floor on transition probabilities' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l transition-min-count -d 'gmm-est: minimum count of a transition state for its probabilities to be updated' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l share-for-pdfs -d 'gmm-est: share transition statistics among states with the same pdfs' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l min-gaussian-weight -d 'Minimum weight below which a Gaussian is not updated (and is removed)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l min-gaussian-occupancy -d 'Minimum occupancy to update a Gaussian (default 10 for diagonal, 100 for full covariance)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l min-variance -d 'Diagonal GMMs: variance floor (absolute)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l variance-floor -d 'Full-covariance GMMs: floor on the eigenvalues of the covariances' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l max-condition -d 'Full-covariance GMMs: maximum condition number of the covariances' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l remove-low-count-gaussians -d 'Remove Gaussians with too little data (rather than leave them unchanged)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -l kaldi-tool -d 'The Kaldi tool this run stands in for (set by the shims)' -r
complete -c amtool -n "__fish_amtool_using_subcommand est" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand score" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand score" -l use-gpu -d 'Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -l threads -d 'CPU threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -l gpus -d 'GPUs to compute on (amtool\'s own option): a number, or all (every GPU CUDA_VISIBLE_DEVICES leaves visible), chosen by free memory as with one; the frames are split among them, with results the same to the bit for any number. Ignored on the CPU. AMTOOL_PARTITIONS=P uses each device (or the CPU) as P logical partitions, to test the splitting without the devices' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -l average -d 'Global GMMs: write the average per-frame log-likelihood of each utterance (one float) instead of the per-frame vector' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -l gselect -d 'Global GMMs: rspecifier of Gaussian-selection lists limiting the Gaussians of each frame' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -l lattices -d 'Lattice rescoring (gmm-rescore-lattice): compact lattices to rescore; the output is then a lattice wspecifier and each arc\'s acoustic cost becomes the model\'s −log-likelihood of its frame\'s pdf' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -l old-acoustic-scale -d 'With --lattices: add in the input lattices\' acoustic costs with this scale rather than discarding them' -r
complete -c amtool -n "__fish_amtool_using_subcommand score" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand score-htk" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score-htk" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score-htk" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand score-htk" -l use-gpu -d 'Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score-htk" -l threads -d 'CPU threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score-htk" -l htk-in -d 'The feature table\'s entries are HTK parameter files (as copy-feats --htk-in)' -r
complete -c amtool -n "__fish_amtool_using_subcommand score-htk" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l use-gpu -d 'Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l threads -d 'CPU threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l gpus -d 'GPUs to compute on (amtool\'s own option): a number, or all (every GPU CUDA_VISIBLE_DEVICES leaves visible), chosen by free memory as with one; the frames are split among them, with results the same to the bit for any number. Ignored on the CPU. AMTOOL_PARTITIONS=P uses each device (or the CPU) as P logical partitions, to test the splitting without the devices' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l n -d 'Number of Gaussians to keep per frame' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l gselect -d 'Rspecifier of earlier Gaussian selections to limit the search to' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -l write-likes -d 'Wspecifier for the total log-likelihood of each utterance (float)' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand global-get-post" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand global-get-post" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand global-get-post" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand global-get-post" -l use-gpu -d 'Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand global-get-post" -l threads -d 'CPU threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand global-get-post" -l n -d 'Number of Gaussians to keep per frame' -r
complete -c amtool -n "__fish_amtool_using_subcommand global-get-post" -l min-post -d 'Minimum posterior to output before pruning and renormalizing (e.g. 0.01)' -r
complete -c amtool -n "__fish_amtool_using_subcommand global-get-post" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand gselect-to-post" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect-to-post" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect-to-post" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand gselect-to-post" -l min-post -d 'If nonzero, posteriors below this threshold are pruned away and the rest renormalized' -r
complete -c amtool -n "__fish_amtool_using_subcommand gselect-to-post" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l use-gpu -d 'Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l threads -d 'CPU threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l spk2utt -d 'Rspecifier for the speaker to utterance-list map (adapt per speaker)' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l binary -d 'Accepted for Kaldi compatibility; the wspecifier\'s `t`/`b` decides, as in Kaldi' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l update-flags -d 'Which GMM parameters are updated: a subset of mvw' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l mean-tau -d 'Tau value for updating means' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l variance-tau -d 'Tau value for updating variances (note: only relevant if update-flags contains "v")' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -l weight-tau -d 'Tau value for updating weights' -r
complete -c amtool -n "__fish_amtool_using_subcommand map-adapt" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l use-gpu -d 'Compute on a GPU: yes (or fail), no, optional (GPU if usable, else CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l threads -d 'CPU threads (0: one per CPU)' -r
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l spk2utt -d 'Rspecifier for the speaker to utterance-list map (adapt per speaker)' -r
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l relevance -d 'Relevance factor r: α = n/(n + r) per Gaussian' -r
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l update-flags -d 'Which parameters are adapted: a subset of mvw' -r
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -l supervector -d 'Write the adapted means as one float vector per key instead of a DiagGmm' -r
complete -c amtool -n "__fish_amtool_using_subcommand ubm-map" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand copy-to-htk" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy-to-htk" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy-to-htk" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand copy-to-htk" -l output-dir -d 'Output directory (created if missing)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy-to-htk" -l output-ext -d 'Extension of the HTK files' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy-to-htk" -l sample-period -d 'HTK sampPeriod, in 100 ns units' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy-to-htk" -l sample-kind -d 'HTK parmKind code (e.g. 6 MFCC, 7 FBANK, 9 USER, 11 PLP; qualifier bits allowed)' -r
complete -c amtool -n "__fish_amtool_using_subcommand copy-to-htk" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand rescore-lattice" -l verbose -d 'Verbose level (higher = more logging)' -r
complete -c amtool -n "__fish_amtool_using_subcommand rescore-lattice" -l print-args -d 'Print the command line to stderr (Kaldi\'s default)' -r
complete -c amtool -n "__fish_amtool_using_subcommand rescore-lattice" -l config -d 'Read options from FILE (lines of --x=y); options on the command line win' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand rescore-lattice" -l old-acoustic-scale -d 'Add in the scores in the input lattices with this scale, rather than discarding them' -r
complete -c amtool -n "__fish_amtool_using_subcommand rescore-lattice" -l use-gpu -d 'Compute on a GPU: yes, no or optional (use one if there is one)' -r
complete -c amtool -n "__fish_amtool_using_subcommand rescore-lattice" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand herest" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand shims" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand completions" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand man" -l completions -d 'Also write the bash/zsh/fish completion scripts into this folder' -r -F
complete -c amtool -n "__fish_amtool_using_subcommand man" -s h -l help -d 'Print help'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "bench" -d 'Run the benchmark cases (../shared/bench/README.md) and print one JSON line per case'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "copy" -d 'Copy Kaldi tables or objects, converting binary/text (copy-feats, copy-matrix, copy-vector, copy-int-vector, copy-post, gmm-copy, gmm-global-copy, fgmm-global-copy, lattice-copy); HTK MMFs and parameter files too'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "acc-stats" -d 'Accumulate EM statistics (gmm-acc-stats-ali, gmm-acc-stats, gmm-global-acc-stats, fgmm-global-acc-stats)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "align" -d 'Forced alignment with a Kaldi model and training graphs (gmm-align-compiled)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "align-equal" -d 'Equally spaced alignments through the training graphs (align-equal-compiled)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "boost-silence" -d 'Scale the weights of the Gaussians of the listed phones\' pdfs (gmm-boost-silence)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "sum-accs" -d 'Sum accumulator files (gmm-sum-accs, gmm-global-sum-accs, fgmm-global-sum-accs)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "est" -d 'Re-estimate a model from accumulated statistics (gmm-est, gmm-global-est, fgmm-global-est)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "score" -d 'Per-frame log-likelihoods: gmm-compute-likes (Kaldi model), gmm-global-get-frame-likes and fgmm-global-get-frame-likes (global DiagGmm / FullGmm); with --lattices, lattice rescoring (gmm-rescore-lattice)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "score-htk" -d 'Per-frame state log-likelihoods of an HTK HMM set (MMFs + HMM list); columns are the emitting states of the listed HMMs in list order'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "gselect" -d 'Gaussian selection: the n best Gaussians of a global GMM per frame (gmm-gselect, fgmm-gselect)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "global-get-post" -d 'Top-n Gaussian posteriors of a global GMM per frame (gmm-global-get-post)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "gselect-to-post" -d 'Posteriors over the selected Gaussians of a global GMM (fgmm-global-gselect-to-post)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "map-adapt" -d 'MAP adaptation of a Kaldi model per speaker or utterance (gmm-adapt-map)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "ubm-map" -d 'Relevance-MAP adaptation of a diagonal UBM per speaker or utterance (GMM-UBM speaker recognition): adapted GMMs or mean supervectors'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "copy-to-htk" -d 'Write each matrix of a Kaldi table as an HTK parameter file (copy-feats-to-htk)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "rescore-lattice" -d 'Replace the acoustic scores on compact lattices using a new model (gmm-rescore-lattice)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "herest" -d 'HTK embedded Baum-Welch re-estimation with all of HERest\'s own options (-C -I -S -H -M -t -u -d -x -o ...)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "shims" -d 'Create symlinks named like the Kaldi tools amtool replaces (put DIR first on PATH)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "completions" -d 'Print a shell completion script (e.g. `amtool completions bash > /etc/bash_completion.d/amtool`)'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "man" -d 'Write the man pages generated from these option definitions into DIR'
complete -c amtool -n "__fish_amtool_using_subcommand help; and not __fish_seen_subcommand_from bench copy acc-stats align align-equal boost-silence sum-accs est score score-htk gselect global-get-post gselect-to-post map-adapt ubm-map copy-to-htk rescore-lattice herest shims completions man help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
